/**
 * OAuth discovery (spec 4.2, 9.4): the authorization server's metadata (RFC 8414) and the
 * MCP endpoint's protected-resource metadata (RFC 9728), at their fixed well-known paths.
 * A client that meets a 401 on `/v1/mcp` follows `resource_metadata` to the second, and
 * from there to the first.
 */
import type { FastifyInstance } from 'fastify';
import {
  authorizationServerMetadataSchema,
  OAUTH_SCOPES,
  protectedResourceMetadataSchema,
} from '../../../contracts/oauth.js';
import { issuerOf, mcpResourceOf } from '../../../oauth/urls.js';
import type { AppDeps } from '../../deps.js';

export function oauthDiscoveryRoutes(app: FastifyInstance, { config }: AppDeps): void {
  app.get(
    '/.well-known/oauth-authorization-server',
    {
      config: { auth: 'public' },
      schema: {
        tags: ['oauth'],
        summary: 'Authorization server metadata (RFC 8414)',
        security: [],
        response: { 200: authorizationServerMetadataSchema },
      },
    },
    async (_req, reply) => {
      // Read per request: a listener on port 0 learns its public URL after the app is built.
      const base = config.publicUrl;
      reply.header('cache-control', 'public, max-age=300');
      return {
        issuer: issuerOf(base),
        authorization_endpoint: `${base}/v1/oauth/authorize`,
        token_endpoint: `${base}/v1/oauth/token`,
        registration_endpoint: `${base}/v1/oauth/register`,
        scopes_supported: [...OAUTH_SCOPES],
        response_types_supported: ['code'],
        response_modes_supported: ['query'],
        grant_types_supported: ['authorization_code', 'refresh_token'],
        code_challenge_methods_supported: ['S256'],
        token_endpoint_auth_methods_supported: ['none'],
        authorization_response_iss_parameter_supported: true,
        client_id_metadata_document_supported: true,
        service_documentation: `${base}/v1/openapi.json`,
      };
    },
  );

  app.get(
    '/.well-known/oauth-protected-resource/v1/mcp',
    {
      config: { auth: 'public' },
      schema: {
        tags: ['oauth'],
        summary: 'The MCP endpoint as a protected resource (RFC 9728)',
        security: [],
        response: { 200: protectedResourceMetadataSchema },
      },
    },
    async (_req, reply) => {
      const base = config.publicUrl;
      reply.header('cache-control', 'public, max-age=300');
      return {
        resource: mcpResourceOf(base),
        resource_name: 'pier MCP endpoint',
        authorization_servers: [issuerOf(base)],
        scopes_supported: [...OAUTH_SCOPES],
        bearer_methods_supported: ['header'],
      };
    },
  );
}
