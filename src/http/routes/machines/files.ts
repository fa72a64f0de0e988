/**
 * Files of a machine (spec 4.9): `GET /v1/machines/:id/files?path=` answers the raw
 * bytes, `PUT` takes them as the body (any content type, streamed, never parsed),
 * `GET …/files/list?path=` lists a directory. docs/api.md documents the answers.
 */
import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import {
  dirListingSchema,
  filePathQuery,
  fileWriteQuery,
  fileWrittenSchema,
  machineIdParams as params,
} from '../../../contracts/machines.js';
import { ApiError } from '../../../errors/api-error.js';
import {
  FILE_CAP_BYTES,
  listGuestDir,
  readGuestFile,
  writeGuestFile,
} from '../../../services/machines/files.js';
import type { AppDeps } from '../../deps.js';
import { principalOf } from '../../plugins/auth.js';
import { auth } from '../../route-auth.js';
import { appOfMachine } from './machine-app.js';

const tags = ['machines'];

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
        querystring: filePathQuery,
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
        querystring: fileWriteQuery,
        response: { 200: fileWrittenSchema },
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
        querystring: filePathQuery,
        response: { 200: dirListingSchema },
      },
      handler: async (req) =>
        listGuestDir(ctx, principalOf(req).orgId, req.params.id, req.query.path),
    });
  });
}
