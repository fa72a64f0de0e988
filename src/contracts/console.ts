/** Console sign-in (CONTRACT 4; spec 2.1): email and password give a short-lived console key. */
import { z } from 'zod';

export const signInBody = z.strictObject({
  email: z.string().min(1).max(254),
  password: z.string().min(1).max(1024),
});
export type SignInBody = z.output<typeof signInBody>;

export const signInAnswerSchema = z.object({ token: z.string(), expiresAt: z.string() });
export type SignInAnswer = z.infer<typeof signInAnswerSchema>;
