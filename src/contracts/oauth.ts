/**
 * OAuth 2.1 for hosted MCP clients (spec 2.3, 4.2, 5.9, 8): the registration body and
 * answer, the consent routes (lookup, decide, with pier's choices of what the client may
 * do) and the grants a person gave. Wire names of the OAuth entrances are RFC 7591's
 * (snake_case); pier's own routes use camelCase like the rest of `/v1`.
 */
import { z } from 'zod';
import { NAME_PATTERN } from './common.js';
import { AGENT_CLASSES } from './tokens.js';

/** The scopes pier grants (spec 2.3); any other asked-for scope is ignored, not granted. */
export const OAUTH_SCOPES = ['mcp', 'offline_access'] as const;

/**
 * Why a redirect URI is refused, or undefined when it is allowed: `http` only on the
 * loopback names (RFC 8252: a desktop client listens on any port), else `https`; never a
 * fragment (RFC 6749 3.1.2) or user info.
 */
export function redirectUriProblem(uri: string): string | undefined {
  let url: URL;
  try {
    url = new URL(uri);
  } catch {
    return 'must be an absolute URL';
  }
  if (uri.includes('#')) return 'must not have a fragment';
  if (url.username || url.password) return 'must not carry user info';
  if (url.protocol === 'https:') return undefined;
  const loopback = ['localhost', '127.0.0.1', '[::1]'].includes(url.hostname);
  if (url.protocol === 'http:' && loopback) return undefined;
  return 'must be https, or http on localhost, 127.0.0.1 or [::1]';
}

const redirectUri = z
  .string()
  .max(2000)
  .superRefine((u, ctx) => {
    const problem = redirectUriProblem(u);
    if (problem) ctx.addIssue({ code: 'custom', message: problem });
  });

/**
 * `POST /v1/oauth/register` (RFC 7591, spec 8 bounds). Fields the spec does not name
 * (logo_uri, client_uri, software_id…) are accepted and ignored: clients send them.
 */
export const registerClientBody = z.object({
  redirect_uris: z.array(redirectUri).min(1).max(10),
  client_name: z.string().min(1).max(120).optional(),
  token_endpoint_auth_method: z
    .string()
    .max(40)
    .refine((m) => m === 'none', { message: 'must be none: pier has public clients only' })
    .optional(),
  grant_types: z
    .array(z.enum(['authorization_code', 'refresh_token']))
    .max(4)
    .optional(),
  response_types: z
    .array(z.enum(['code']))
    .max(4)
    .optional(),
  scope: z.string().max(200).optional(),
});
export type RegisterClientBody = z.infer<typeof registerClientBody>;

export const registeredClientSchema = z.object({
  client_id: z.string(),
  client_name: z.string().optional(),
  redirect_uris: z.array(z.string()),
  grant_types: z.array(z.string()),
  response_types: z.array(z.string()),
  token_endpoint_auth_method: z.literal('none'),
  client_id_issued_at: z.number(),
  scope: z.string().optional(),
});
export type RegisteredClient = z.infer<typeof registeredClientSchema>;

export const consentLookupBody = z.strictObject({ requestId: z.string().min(1).max(120) });

/** Grant lifetimes a person may choose, in days; refresh tokens live as long. */
export const GRANT_DAYS = { min: 1, max: 365, default: 30 } as const;

/**
 * `POST /v1/oauth/consent/decide`: `approve` (spec) and what the client may do (pier's
 * extension): the agent class of its tokens (`production`, read-only, unless chosen),
 * the apps it may touch (absent: the whole organization), `prodDataRead`, and how many
 * days the grant lasts.
 */
export const consentDecideBody = z
  .strictObject({
    requestId: z.string().min(1).max(120),
    approve: z.boolean(),
    agentClass: z.enum(AGENT_CLASSES).default('production'),
    apps: z.array(z.string().regex(NAME_PATTERN, 'must be an app name')).min(1).max(50).optional(),
    prodDataRead: z.boolean().optional(),
    expiresInDays: z.number().int().min(GRANT_DAYS.min).max(GRANT_DAYS.max).optional(),
  })
  .superRefine((b, ctx) => {
    if (b.prodDataRead && b.agentClass !== 'production') {
      ctx.addIssue({
        code: 'custom',
        path: ['prodDataRead'],
        message: 'only for agent class production',
      });
    }
  });
export type ConsentDecideBody = z.output<typeof consentDecideBody>;

export const consentLookupSchema = z.object({
  requestId: z.string(),
  client: z.object({
    id: z.string(),
    name: z.string().optional(),
    /** True: named by a metadata document at its https `id`; false: registered here. */
    verified: z.boolean(),
    redirectUri: z.string(),
    redirectHost: z.string(),
  }),
  scopes: z.array(z.string()),
  requestedFrom: z.string(),
  requestedAt: z.string(),
  expiresAt: z.string(),
  choices: z.object({
    agentClasses: z.array(z.enum(AGENT_CLASSES)),
    agentClass: z.enum(AGENT_CLASSES),
    apps: z.array(z.string()),
    prodDataRead: z.boolean(),
    expiresInDays: z.object({ min: z.number(), max: z.number(), default: z.number() }),
  }),
});
export type ConsentLookup = z.infer<typeof consentLookupSchema>;

export const consentDecidedSchema = z.object({
  redirectUrl: z.string(),
  approved: z.boolean(),
  grantId: z.string().optional(),
});
export type ConsentDecided = z.infer<typeof consentDecidedSchema>;

/** A grant a person gave a client, as `GET /v1/oauth/grants` lists it. */
export const grantRecordSchema = z.object({
  id: z.string(),
  clientId: z.string(),
  clientName: z.string().optional(),
  verified: z.boolean(),
  redirectUri: z.string(),
  userId: z.string().optional(),
  scopes: z.array(z.string()),
  agent: z.object({
    class: z.enum(AGENT_CLASSES),
    apps: z.array(z.string()).optional(),
    prodDataRead: z.boolean().optional(),
  }),
  createdAt: z.string(),
  expiresAt: z.string(),
});
export type GrantRecord = z.infer<typeof grantRecordSchema>;

export const grantIdParams = z.strictObject({ id: z.string().min(1).max(120) });

export const grantListSchema = z.array(grantRecordSchema);

/** `GET /.well-known/oauth-authorization-server` (RFC 8414). */
export const authorizationServerMetadataSchema = z.object({
  issuer: z.string(),
  authorization_endpoint: z.string(),
  token_endpoint: z.string(),
  registration_endpoint: z.string(),
  scopes_supported: z.array(z.string()),
  response_types_supported: z.array(z.string()),
  response_modes_supported: z.array(z.string()),
  grant_types_supported: z.array(z.string()),
  code_challenge_methods_supported: z.array(z.string()),
  token_endpoint_auth_methods_supported: z.array(z.string()),
  authorization_response_iss_parameter_supported: z.boolean(),
  client_id_metadata_document_supported: z.boolean(),
  service_documentation: z.string(),
});

/** `GET /.well-known/oauth-protected-resource/v1/mcp` (RFC 9728). */
export const protectedResourceMetadataSchema = z.object({
  resource: z.string(),
  resource_name: z.string(),
  authorization_servers: z.array(z.string()),
  scopes_supported: z.array(z.string()),
  bearer_methods_supported: z.array(z.string()),
});

/**
 * The token endpoint's answer (RFC 6749 5.1). Errors are OAuth's own
 * `{error, error_description}` (5.2), not pier's.
 */
export const tokenAnswerSchema = z.object({
  access_token: z.string(),
  token_type: z.literal('Bearer'),
  expires_in: z.number(),
  scope: z.string(),
  refresh_token: z.string().optional(),
});
export const oauthErrorSchema = z.object({ error: z.string(), error_description: z.string() });
