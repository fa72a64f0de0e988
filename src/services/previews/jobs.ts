/** The durable job of previews: `previews.create` (work.ts), one run at a time. */
import { z } from 'zod';
import { defineJob, exponentialBackoff } from '../../jobs/catalogue.js';
import type { ServiceContext } from '../context.js';
import { PREVIEW_CREATE_ATTEMPTS, runPreviewJob } from './work.js';

export function previewJobs(get: () => ServiceContext) {
  return [
    defineJob({
      kind: 'previews.create',
      payload: z.object({ previewId: z.string() }),
      maxAttempts: PREVIEW_CREATE_ATTEMPTS,
      backoffMs: exponentialBackoff(2000),
      run: ({ previewId }, job) => runPreviewJob(get(), previewId, job),
    }),
  ];
}
