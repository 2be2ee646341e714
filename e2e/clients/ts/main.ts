// A Gatehouse client as a TypeScript user would write it: openapi-fetch over the types that
// openapi-typescript generates from the committed openapi/openapi.json. e2e/ts_client_test.go
// generates those types into a temporary folder, maps the module "gatehouse-openapi" to them,
// and type-checks this file with `tsc --strict --noEmit`. Every request body is written the way
// the contract allows (optional properties left out, open objects given keys) and every
// response field read is annotated with its type, so a spec change that would break a user's
// client fails `make test`.
import createClient from "openapi-fetch";
import type { paths } from "gatehouse-openapi";

/** Unwraps an openapi-fetch result: its data, or an error naming the step. */
function ok<T>(step: string, result: { data?: T; error?: unknown; response: Response }): T {
  if (result.data === undefined) {
    throw new Error(`${step}: ${result.response.status} ${JSON.stringify(result.error)}`);
  }
  return result.data;
}

export async function run(baseUrl: string): Promise<void> {
  // The session cookie rides along (credentials); unsafe cookie requests carry the base URL as
  // Origin, which a browser sets by itself.
  const user = createClient<paths>({ baseUrl, credentials: "include", headers: { Origin: baseUrl } });

  // rememberMe is optional: it defaults to true.
  const signUp = ok("sign-up", await user.POST("/api/auth/sign-up/email", {
    body: { name: "Ada Lovelace", email: "ada@example.com", password: "correct-horse-battery" },
  }));
  const email: string = signUp.user.email;
  const signIn = ok("sign-in", await user.POST("/api/auth/sign-in/email", {
    body: { email, password: "correct-horse-battery" },
  }));
  // The answer is a session, or {twoFactorRedirect} when the user's second factor is due.
  if (!("token" in signIn)) throw new Error("sign-in: a second factor is due");
  const token: string = signIn.token;

  const org = ok("create organization", await user.POST("/api/v1/organizations", { body: { name: "Acme" } }));
  const organizationId: string = org.data.id;
  const myRole: string = org.data.role;

  // Organization metadata is any JSON object.
  const authOrg = ok("create organization (auth)", await user.POST("/api/auth/organization/create", {
    body: { name: "Globex", slug: "globex", metadata: { plan: "pro", seats: 5 } },
  }));
  const plan: unknown = authOrg.metadata?.plan;

  const project = ok("create project", await user.POST("/api/v1/organizations/{organizationId}/projects", {
    params: { path: { organizationId } },
    body: { name: "Storefront" },
  }));
  const projectId: string = project.data.id;
  const production = project.data.environments.find((e) => e.name === "production");
  if (production === undefined) {
    throw new Error("create project: no production environment");
  }
  const environmentId: string = production.id;

  const sa = ok("create service account", await user.POST("/api/v1/projects/{projectId}/service-accounts", {
    params: { path: { projectId } },
    body: { name: "checkout-service", scopes: ["project:read"] },
  }));
  const accountId: string = sa.data.id;
  const apiKey: string = sa.data.apiKey;

  // secret is optional: it defaults to false.
  const put = ok("put config entry", await user.PUT("/api/v1/environments/{environmentId}/configs/{key}", {
    params: { path: { environmentId, key: "ORDER_LIMITS" } },
    body: { value: { maxItems: 20, currencies: ["EUR", "USD"] } },
  }));
  const version: number = put.data.version;
  const got = ok("get config entry", await user.GET("/api/v1/environments/{environmentId}/configs/{key}", {
    params: { path: { environmentId, key: "ORDER_LIMITS" } },
  }));
  const value: unknown = got.data.value;
  const masked: boolean = got.data.masked;

  const role = ok("create project role", await user.POST("/api/v1/projects/{projectId}/roles", {
    params: { path: { projectId } },
    body: { name: "Editor", permissions: ["document:read", "document:write"] },
  }));
  const roleId: string = role.data.id;
  const permissions: string[] = role.data.permissions;

  const binding = ok("create role binding", await user.POST("/api/v1/projects/{projectId}/role-bindings", {
    params: { path: { projectId } },
    body: { roleId, principalType: "service_account", principalId: accountId },
  }));
  const roleSlug: string = binding.data.roleSlug;

  // The service account asks about itself with its own key.
  const machine = createClient<paths>({ baseUrl, headers: { "X-API-Key": apiKey } });
  const decision = ok("authorize", await machine.POST("/api/v1/authorize", {
    body: { projectId, principalType: "service_account", principalId: accountId, permission: "document:write" },
  }));
  const allowed: boolean = decision.data.allowed;
  const roles: string[] = decision.data.roles;
  const decisionId: string = decision.data.decisionId;

  // The document is an open object, not an empty one.
  const doc = ok("openapi document", await user.GET("/api/v1/openapi.json"));
  const openapi: unknown = doc.openapi;

  console.log({ token, myRole, plan, version, value, masked, permissions, roleSlug, allowed, roles, decisionId, openapi });
}
