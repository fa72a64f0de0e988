/**
 * The agent rules (spec 5.4): what an agent token may do on a route, decided from the
 * route's declared agent rule, the app the request concerns and the token's block.
 * An agent token limited to some apps may not hand them anything from outside (attach or
 * detach a database or a bucket, attach a free volume: the route names it as `widens`).
 * Pure: the audit write and the answer are the caller's.
 */
import type { ErrorCode } from '../errors/catalogue.js';
import type { AgentBlock } from '../store/schema.js';

/** A0 none; AW sandbox and twin; AA every class; AD production needs prodDataRead. */
export type AgentRule = 'A0' | 'AW' | 'AA' | 'AD';

export interface AgentRequest {
  rule: AgentRule | undefined;
  app: string | undefined;
  usesOrgHeader: boolean;
  /**
   * What the request would hand the app from outside it (attaching a database or a
   * bucket gives the app's machines its credentials), when it does; judged only for
   * tokens with an app list.
   */
  widens?: string;
}

/** The refusal code for this request, or undefined when the agent may go ahead. */
export function judgeAgent(agent: AgentBlock, req: AgentRequest): ErrorCode | undefined {
  if (req.usesOrgHeader) return 'agent-token-delegation';
  if (req.rule === undefined) return 'agent-token-route-unknown';
  if (req.rule === 'A0') return 'agent-token-credential';
  if (agent.class === 'production') {
    if (req.rule === 'AW') return 'agent-token-production-readonly';
    if (req.rule === 'AD' && agent.prodDataRead !== true) return 'agent-token-production-data';
  }
  if (agent.apps && (req.app === undefined || !agent.apps.includes(req.app))) {
    return 'agent-token-app-scope';
  }
  // A token limited to some apps would reach, through them, what it could not reach itself.
  if (agent.apps && req.widens !== undefined) return 'agent-token-app-scope';
  return undefined;
}
