/** Public UDP endpoints of an app (spec 4.6). */
import { z } from 'zod';

/** Every field is optional, so the body may be left out altogether. */
export const createUdpBody = z
  .strictObject({
    /** Default: the app's internalPort (of its newest machine), else 3000. */
    targetPort: z.number().int().min(1).max(65535).optional(),
  })
  .nullish();
export type CreateUdpBody = NonNullable<z.infer<typeof createUdpBody>>;

export const udpEndpointSchema = z.object({
  id: z.string(),
  appName: z.string(),
  publicPort: z.number().int(),
  targetPort: z.number().int(),
  host: z.string(),
  /** `host:publicPort`. */
  address: z.string(),
  createdAt: z.string(),
});
export type UdpEndpoint = z.infer<typeof udpEndpointSchema>;

export const createdUdpSchema = udpEndpointSchema.extend({ note: z.string() });
export type CreatedUdp = z.infer<typeof createdUdpSchema>;

export const udpListSchema = z.array(udpEndpointSchema);
export const udpParams = z.object({ name: z.string().max(63) });
export const udpIdParams = udpParams.extend({ id: z.string().max(64) });
