/**
 * Files of a machine (spec 4.9): `GET /v1/machines/:id/files?path=` answers the raw
 * bytes, `PUT` takes them as the body (any content type, streamed, never parsed),
 * `GET …/files/list?path=` lists a directory. docs/api.md documents the answers.
 */
import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { ApiError } from '../../../errors/api-error.js';
import {
  FILE_CAP_BYTES,
  listGuestDir,
  readGuestFile,
  writeGuestFile,
} from '../../../services/machines/files.js';
import type { AppDeps } from '../../app.js';
import { principalOf } from '../../plugins/auth.js';
import { auth } from '../../route-auth.js';
import { appOfMachine } from './machine-app.js';

const tags = ['machines'];
const params = z.object({ id: z.string().min(1).max(64) });
const pathQuery = z.string().min(1).max(4096).startsWith('/', 'must be an absolute path');

const entrySchema = z.object({
  name: z.string(),
  type: z.enum(['file', 'dir', 'symlink', 'other']),
  size: z.number(),
  mode: z.string(),
  uid: z.number(),
  gid: z.number(),
  modifiedAt: z.string(),
  target: z.string().optional(),
});

export function machineFileRoutes(root: FastifyInstance, { ctx }: AppDeps): void {
  const appOf = appOfMachine(ctx);
  // Reading a machine's files reads the data it holds: production agents need prodDataRead.
  const read = { ...auth.R('AD'), appOf };
  void root.register(async (scope) => {
    // The body of a PUT is the file: kept as the raw stream, whatever its content type.
    scope.removeAllContentTypeParsers();
    scope.addContentTypeParser('*', (_req, _payload, done) => done(null, undefined));
    const app = scope.withTypeProvider<ZodTypeProvider>();

    app.get('/v1/machines/:id/files', {
      config: { auth: read },
      schema: {
        tags,
        summary: 'Raw bytes of one file of a running machine',
        params,
        querystring: z.strictObject({ path: pathQuery }),
      },
      handler: async (req, reply) => {
        const { size, stream } = await readGuestFile(
          ctx,
          principalOf(req).orgId,
          req.params.id,
          req.query.path,
        );
        return reply.type('application/octet-stream').header('content-length', size).send(stream);
      },
    });

    app.put('/v1/machines/:id/files', {
      config: { auth: { ...auth.F('AW'), appOf } },
      schema: {
        tags,
        summary: 'Write one file of a running machine whole (the body is its bytes)',
        params,
        querystring: z.strictObject({
          path: pathQuery,
          mode: z
            .string()
            .regex(/^0?[0-7]{3,4}$/, 'must be octal permission bits like 0644')
            .optional(),
        }),
        response: { 200: z.object({ path: z.string(), size: z.number() }) },
      },
      handler: async (req) => {
        const length = Number(req.headers['content-length']);
        if (length > FILE_CAP_BYTES) {
          throw new ApiError(
            'too-large',
            `At most ${FILE_CAP_BYTES} bytes may be written at once.`,
            {
              limit: FILE_CAP_BYTES,
            },
          );
        }
        return writeGuestFile(
          ctx,
          principalOf(req).orgId,
          req.params.id,
          req.query.path,
          req.raw,
          parseInt(req.query.mode ?? '0644', 8),
        );
      },
    });

    app.get('/v1/machines/:id/files/list', {
      config: { auth: read },
      schema: {
        tags,
        summary: 'The entries of one directory of a running machine',
        params,
        querystring: z.strictObject({ path: pathQuery }),
        response: { 200: z.object({ path: z.string(), entries: z.array(entrySchema) }) },
      },
      handler: async (req) =>
        listGuestDir(ctx, principalOf(req).orgId, req.params.id, req.query.path),
    });
  });
}
