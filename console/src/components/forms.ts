// Form helpers: the API validates as the spec does and answers 400 with errors[].path
// (["body", "name"], ["query", "limit"], …). fieldErrors maps those to form fields so a view
// can show the API's message next to the field it names.
import { ApiProblem } from '../api/problem';

/** fieldErrors returns {"name": "must not be empty", "scopes.0": "…"} for a body problem. */
export function fieldErrors(error: unknown): Record<string, string> {
  const out: Record<string, string> = {};
  if (!(error instanceof ApiProblem)) return out;
  for (const fe of error.fieldErrors) {
    const [where, ...rest] = fe.path;
    const key = where === 'body' ? rest.join('.') : fe.path.join('.');
    if (key && !(key in out)) out[key] = fe.message;
  }
  return out;
}

/** fieldError is the API's message for one field, if any. */
export function fieldError(error: unknown, field: string): string | undefined {
  return fieldErrors(error)[field];
}

/**
 * unclaimed returns the problem unless every one of its field errors belongs to one of the
 * given fields (shown next to them): a form shows what is left in a ProblemAlert.
 */
export function unclaimed(error: unknown, fields: string[]): unknown {
  if (!(error instanceof ApiProblem) || error.fieldErrors.length === 0) return error;
  const keys = Object.keys(fieldErrors(error));
  return keys.every((k) => fields.includes(k)) ? null : error;
}
