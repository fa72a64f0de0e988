/**
 * The addresses and lifetimes of pier's OAuth server (spec 5.9, 5.10). The issuer is
 * pier's public base URL; the one protected resource is its MCP endpoint (RFC 8707).
 * Read per request: a listener on port 0 learns its public URL after the app is built.
 */

/** Access tokens: short-lived agent keys; a client refreshes for the next one. */
export const ACCESS_TOKEN_TTL_S = 3600;
/** A code is exchanged at once by a client that is waiting for it (RFC 6749 4.1.2). */
export const CODE_TTL_S = 60;
/** How long the consent page may stay open before the request expires. */
export const REQUEST_TTL_S = 600;

export const issuerOf = (publicUrl: string): string => publicUrl;
export const mcpResourceOf = (publicUrl: string): string => `${publicUrl}/v1/mcp`;
export const resourceMetadataUrlOf = (publicUrl: string): string =>
  `${publicUrl}/.well-known/oauth-protected-resource/v1/mcp`;

/**
 * The `WWW-Authenticate` of a 401 from `/v1/mcp` (RFC 6750 3, RFC 9728 5.1): where the
 * client finds the authorization server, and `invalid_token` when it sent one.
 */
export function mcpChallengeOf(publicUrl: string, tokenSent: boolean): string {
  const meta = `resource_metadata="${resourceMetadataUrlOf(publicUrl)}"`;
  return tokenSent ? `Bearer error="invalid_token", ${meta}` : `Bearer ${meta}`;
}
