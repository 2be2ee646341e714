// The console's only way to the server: openapi-fetch over the types openapi-typescript
// generates from the committed openapi/openapi.json. Authentication is the session cookie
// (credentials: 'same-origin'); browsers send the Origin header on same-origin POST, PATCH and
// DELETE, which is what the API's cookie-write check needs.
import createClient, { type Middleware } from 'openapi-fetch';
import type { paths } from './schema.gen';
import { ApiProblem, isProblemBody } from './problem';

export const api = createClient<paths>({ baseUrl: window.location.origin, credentials: 'same-origin' });

/** The hosted sign-in page (which handles second factors and passkeys), coming back to `back`. */
export function signInURL(back: string = window.location.pathname + window.location.search): string {
  return '/api/auth/sign-in?' + new URLSearchParams({ callbackURL: back }).toString();
}

/** Sends the browser to the hosted sign-in page. */
export function goToSignIn(): void {
  window.location.assign(signInURL());
}

// A 401 from /api/v1 means the session ended: sign in again and come back here.
const signInOn401: Middleware = {
  onResponse({ response, request }) {
    if (response.status === 401 && new URL(request.url).pathname.startsWith('/api/v1/')) {
      goToSignIn();
    }
    return response;
  },
};
api.use(signInOn401);

type Result<T> = { data?: T; error?: unknown; response: Response };

/**
 * unwrap returns a call's data, or throws an ApiProblem carrying the problem+json body
 * (title, status, requestId, errors[]) so that views show the API's own words.
 */
export async function unwrap<T>(call: Promise<Result<T>>): Promise<T> {
  const { data, error, response } = await call;
  if (response.ok) return data as T;
  throw toProblem(error, response);
}

export function toProblem(body: unknown, response: Response): ApiProblem {
  const requestId = response.headers.get('x-request-id') ?? undefined;
  if (isProblemBody(body)) {
    return new ApiProblem({ ...body, requestId: body.requestId ?? requestId });
  }
  // better-auth's wire answers {code, message}.
  const b = body as { code?: string; message?: string } | undefined;
  return new ApiProblem({
    type: 'about:blank',
    title: b?.message ?? response.statusText ?? 'Request failed',
    status: response.status,
    requestId,
    code: b?.code,
  });
}
