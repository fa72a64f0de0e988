/** Console sign-in (CONTRACT 4; spec 2.1): email and password give a short-lived console key. */
import { z } from 'zod';

export const signInBody = z.strictObject({
  email: z.string().min(1).max(254),
  password: z.string().min(1).max(1024),
});
export type SignInBody = z.output<typeof signInBody>;

export const signInAnswerSchema = z.object({ token: z.string(), expiresAt: z.string() });
export type SignInAnswer = z.infer<typeof signInAnswerSchema>;

/** Who a key is (the console's header line and its sign-out): `GET /console/api/me`. */
export const meAnswerSchema = z.object({
  key: z.object({
    id: z.string(),
    console: z.boolean(),
    expiresAt: z.string().nullable(),
  }),
  user: z.object({ id: z.string(), email: z.string(), role: z.string() }).nullable(),
  org: z.object({ id: z.string(), name: z.string() }),
});
export type MeAnswer = z.infer<typeof meAnswerSchema>;
