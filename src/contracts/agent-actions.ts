/** The audit of agent tokens (spec 4.1 agent actions): every judged request with its verdict. */
import { z } from 'zod';

export const agentActionSchema = z.object({
  id: z.string(),
  tokenId: z.string(),
  method: z.string(),
  route: z.string(),
  path: z.string(),
  app: z.string().optional(),
  verdict: z.enum(['allowed', 'refused']),
  code: z.string().optional(),
  requestId: z.string(),
  at: z.string(),
});
export type AgentAction = z.infer<typeof agentActionSchema>;

export const agentActionListSchema = z.array(agentActionSchema);

export const agentActionQuery = z.strictObject({
  limit: z.coerce.number().int().min(1).max(1000).default(100),
  token: z.string().min(1).max(64).optional(),
});
export type AgentActionQuery = z.output<typeof agentActionQuery>;
