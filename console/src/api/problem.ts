import type { components } from './schema.gen';

export type ProblemBody = components['schemas']['Problem'] & { code?: string };
export type FieldError = components['schemas']['ProblemFieldError'];

/** An API refusal: the problem+json document the server answered, as an Error. */
export class ApiProblem extends Error {
  readonly body: ProblemBody;
  constructor(body: ProblemBody) {
    super(body.title);
    this.name = 'ApiProblem';
    this.body = body;
  }
  get status(): number {
    return this.body.status;
  }
  get requestId(): string | undefined {
    return this.body.requestId;
  }
  get fieldErrors(): FieldError[] {
    return this.body.errors ?? [];
  }
}

export function isProblemBody(x: unknown): x is ProblemBody {
  return typeof x === 'object' && x !== null && 'title' in x && 'status' in x && 'type' in x;
}
