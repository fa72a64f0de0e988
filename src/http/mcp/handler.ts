/**
 * The SDK's HTTP handler for both protocol eras, answering `application/json` in both.
 * The 2026-07-28 leg is `createMcpHandler` (strict; its default `auto` response mode
 * answers JSON as long as no tool sends a message before its result, and pier's tools
 * send none; `json` would say so on stderr at every start); 2025-era
 * requests (`initialize`, no `_meta` envelope) go, as `isLegacyRequest` decides, to a
 * stateless leg built like the SDK's own fallback but with `enableJsonResponse`: the
 * fallback would answer with an event stream, and spec 4.12 asks for JSON.
 */
import {
  createMcpHandler,
  isLegacyRequest,
  WebStandardStreamableHTTPServerTransport,
  type McpHandlerRequestOptions,
  type McpServerFactory,
} from '@modelcontextprotocol/server';

export interface McpHandler {
  fetch(request: Request, options: McpHandlerRequestOptions): Promise<Response>;
  close(): Promise<void>;
}

export function mcpHandler(factory: McpServerFactory, maxRequestBodySize: number): McpHandler {
  const modern = createMcpHandler(factory, {
    legacy: 'reject',
    maxRequestBodySize,
  });

  async function legacy(request: Request, options: McpHandlerRequestOptions): Promise<Response> {
    const server = await factory({
      era: 'legacy',
      authInfo: options.authInfo,
      requestInfo: request,
    });
    const transport = new WebStandardStreamableHTTPServerTransport({
      sessionIdGenerator: undefined,
      enableJsonResponse: true,
      maxRequestBodySize,
    });
    await server.connect(transport);
    try {
      return await transport.handleRequest(request, {
        authInfo: options.authInfo,
        parsedBody: options.parsedBody,
      });
    } finally {
      await transport.close().catch(() => {});
      await server.close().catch(() => {});
    }
  }

  return {
    fetch: async (request, options) =>
      (await isLegacyRequest(request, options.parsedBody, { maxRequestBodySize }))
        ? legacy(request, options)
        : modern.fetch(request, options),
    close: () => modern.close(),
  };
}
