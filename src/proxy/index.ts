/** The proxy module: app traffic by `Host`, round-robin, wake on request, WebSockets. */
export { AppProxy } from './app-proxy.js';
export { proxyPlugin } from './fastify.js';
export { parseAppHost, normalizePublicHost, type AppAddress } from './host.js';
export type { AppProxyOptions, ProxyLog, ProxyTarget, ProxyTargets } from './types.js';
