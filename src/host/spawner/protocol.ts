/** The messages between pier and its spawner process (spawner.ts, spawner-child.ts). */

/** Run `file` with `args`, as execFile would. */
export interface SpawnRequest {
  id: number;
  file: string;
  args: string[];
  env: Record<string, string>;
  timeoutMs: number;
  maxBuffer: number;
  /** Written to its stdin, which is then closed. */
  input?: string;
}

/** How it went: execFile's callback, as plain data. */
export interface SpawnReply {
  id: number;
  stdout: string;
  stderr: string;
  /** Undefined when it exited 0. */
  error?: {
    message: string;
    /** The exit status, or an errno name (`ENOENT`) when it could not start. */
    code: number | string | null;
    signal: string | null;
    killed: boolean;
  };
}
