/**
 * The closed catalogue of error codes (spec part 7). Every failure pier answers carries
 * one of these codes and its status; clients branch on the code. Codes marked "pier"
 * are ours, added where the spec leaves the design open (spec 7: new codes may appear).
 */
export const errorCatalogue = {
  // 7.1 generic code per status
  'bad-request': { status: 400, message: 'The request is malformed or out of range.' },
  unauthenticated: { status: 401, message: 'A valid API key is required.' },
  'credit-blocked': {
    status: 402,
    message: 'Credit is at zero; only reads, stops and billing pass.',
  },
  forbidden: { status: 403, message: 'This key may not do this.' },
  'not-found': { status: 404, message: 'Not found.' },
  'wait-timeout': { status: 408, message: 'The wait ended before the state was reached.' },
  conflict: { status: 409, message: 'This conflicts with the current state.' },
  gone: { status: 410, message: 'This existed and is gone.' },
  'too-large': { status: 413, message: 'The body is too large for this route.' },
  unprocessable: { status: 422, message: 'Well-formed, but it cannot be carried out.' },
  'upgrade-required': { status: 426, message: 'This route needs a WebSocket upgrade.' },
  'rate-limited': { status: 429, message: 'Too many requests; retry after the time given.' },
  internal: { status: 500, message: 'The platform failed.' },
  'not-implemented': { status: 501, message: 'Unavailable on this installation.' },
  'upstream-failed': { status: 502, message: 'A host, object store or connected service failed.' },
  unavailable: { status: 503, message: 'Not possible now.' },
  'upstream-timeout': { status: 504, message: 'A host or service did not answer in time.' },

  // 7.2 specific codes
  'name-taken': { status: 409, message: 'The name is used elsewhere on the platform.' },
  'already-exists': { status: 409, message: 'It is already there.' },
  'name-reserved': { status: 400, message: 'The platform keeps this name.' },
  'org-suspended': { status: 403, message: 'The organization is suspended by the operator.' },
  'delegation-refused': {
    status: 403,
    message: 'The organization header names an organization this key does not manage.',
  },
  'creator-proof': {
    status: 403,
    message: "Creating an organization needs the console's signed proof.",
  },
  'token-scope': { status: 403, message: 'The key scopes do not cover this route.' },
  'no-capacity': { status: 503, message: 'No host in the region has room; retry.' },
  'lease-held': {
    status: 503,
    message: 'Another host still holds the volume or checkpoint; retry shortly.',
  },
  'create-failed': { status: 503, message: 'The host could not create the machine.' },
  'database-unavailable': { status: 503, message: 'The platform database is unreachable; retry.' },
  'not-a-copy': { status: 409, message: 'The database is neither a fork nor a branch.' },
  'not-ready': { status: 409, message: 'The copy is still restoring or failed.' },
  'url-handed-out': { status: 409, message: "The copy's URL was already handed out." },
  'agent-token-production-readonly': {
    status: 403,
    message: 'An agent token of class production may only read.',
  },
  'agent-token-production-data': {
    status: 403,
    message:
      'An agent token of class production needs prodDataRead to read data held by production.',
  },
  'agent-token-credential': {
    status: 403,
    message:
      'No agent token mints, reveals or revokes credentials or administers the organization.',
  },
  'agent-token-app-scope': {
    status: 403,
    message: "The request concerns an app outside the agent token's list, or no app.",
  },
  'agent-token-route-unknown': {
    status: 403,
    message: 'This route is unknown to the agent rules.',
  },
  'agent-token-delegation': {
    status: 403,
    message: 'An agent token acts only in its own organization.',
  },
  'agent-audit-unavailable': {
    status: 503,
    message: 'The audit record could not be written, so the action did not run.',
  },
  'org-limit-computers': {
    status: 403,
    message: 'The organization has as many computers as allowed.',
  },
  'org-limit-apps': { status: 403, message: 'The organization has as many apps as allowed.' },
  'org-limit-udp': {
    status: 403,
    message: 'The organization has as many UDP endpoints as allowed.',
  },
  'udp-ports-exhausted': { status: 503, message: 'No public UDP port is free; retry later.' },
  'org-limit-databases': {
    status: 403,
    message: 'The organization has as many databases as allowed.',
  },
  'org-limit-machines': {
    status: 403,
    message: 'The organization has as many machines as allowed.',
  },
  'org-limit-memory': {
    status: 403,
    message: "The request would take the organization's memory past its limit.",
  },
  'org-limit-storage': {
    status: 403,
    message: "The request would take the organization's reserved storage past its limit.",
  },
  'org-limit-webhooks': {
    status: 403,
    message: 'The organization has as many webhooks as allowed.',
  },
  'csrf-failed': {
    status: 403,
    message: 'The console refused a request without its CSRF token or from another site.',
  },
  'billing-console-only': {
    status: 403,
    message: 'Billing changes are made only through the console by an admin.',
  },
  'not-prepaid': { status: 409, message: 'The organization has no credit account.' },
  'no-customer': { status: 409, message: 'There is no payment relationship yet.' },
  // pier: payments (docs/billing.md)
  'payments-unavailable': {
    status: 503,
    message: 'This installation has no payment provider; the operator grants credit.',
  },
  'bad-signature': {
    status: 400,
    message: 'The event is not signed by the payment provider (or is too old).',
  },
  'volume-attached': { status: 409, message: 'The volume is attached; it cannot be deleted.' },
  'volume-needs-single-machine': {
    status: 409,
    message: 'An app with a volume runs exactly one machine.',
  },
  'build-not-found': { status: 404, message: 'No such build in the organization.' },
  // pier: builds (CONTRACT 7)
  'build-not-ready': { status: 409, message: 'The build has not produced an image.' },
  'mail-domain': { status: 409, message: 'The name is a sending domain.' },
  'shadows-default-address': { status: 409, message: "The domain is an app's default address." },
  'zone-in-use': { status: 409, message: 'The zone cannot be released.' },
  'zones-unavailable': { status: 503, message: 'The zone service is unavailable.' },
  'not-protected': { status: 409, message: 'The app has no protection.' },
  'not-signed': { status: 409, message: "The app's protection is not in signed-link mode." },
  'not-answerable': { status: 409, message: 'The consent request cannot be answered.' },
  'invalid-key': { status: 400, message: 'The SSH public key is invalid.' },
  duplicate: { status: 409, message: 'The SSH key is already present.' },
  limit: { status: 409, message: 'The SSH key limit is reached.' },

  // 7.3 machine start / create
  'start-interrupted': { status: 503, message: 'The start was interrupted on the host.' },
  'guest-exited': { status: 503, message: 'The process ended during start.' },
  'port-timeout': { status: 503, message: 'No answer on its port in time.' },
  'host-refused': { status: 503, message: 'The host refused the action.' },
  'host-unreachable': { status: 503, message: 'The host did not answer.' },
  'machine-busy': { status: 409, message: 'Another operation is in progress on the machine.' },

  // 7.4 rollback
  'release-not-found': { status: 404, message: 'No such release.' },
  'rollback-target-current': { status: 409, message: 'The target is the running release.' },
  'rollback-same-build': { status: 409, message: 'Same build as the current release.' },
  'rollback-target-never-live': { status: 409, message: 'The target never went live.' },
  'release-artifact-gone': { status: 409, message: 'The image is no longer available.' },
  'no-previous-release': { status: 409, message: 'There is no earlier live release.' },
  'rollback-not-for-resources': {
    status: 409,
    message: 'The app backs a database; restore instead.',
  },
  'rollback-needs-machine-config': {
    status: 409,
    message: 'There are no machine settings to reuse.',
  },
  'deploy-in-flight': { status: 409, message: 'Another deploy is running.' },

  // 7.5 computer viewer and control
  'not-a-computer': { status: 409, message: 'The machine is not a computer.' },
  'machine-stopped': { status: 409, message: 'The machine is stopped; start it first.' },
  'not-placed': { status: 503, message: 'The machine has no host yet.' },
  'view-key-unreadable': { status: 503, message: 'The view key cannot be decrypted now.' },
  'view-key-too-short': { status: 409, message: 'The view key is too short.' },
  'several-machines': { status: 409, message: 'Control needs exactly one machine.' },
  'control-held': { status: 409, message: 'Someone else holds control.' },
  'control-busy': { status: 409, message: 'Another control change is in progress.' },
  'computer-control-missing': {
    status: 409,
    message: 'The image predates control leases; redeploy.',
  },
  'guest-agent-absent': { status: 409, message: 'There is no guest channel; redeploy.' },
  'guest-channel-off': { status: 503, message: 'The guest channel is off on the host.' },
  'guest-unreachable': { status: 503, message: 'The guest did not answer.' },
  'guest-failed': { status: 502, message: 'The control tool ran and failed.' },
  'managed-service': { status: 409, message: 'A managed database machine takes no shell.' },
  'resource-check-failed': {
    status: 503,
    message: 'Could not tell whether the machine backs a database.',
  },

  // 7.6 shell, tunnel, file transfer
  'machine-not-found': { status: 404, message: 'No such machine in the organization.' },
  'console-machine': { status: 409, message: 'A console or job machine takes no shell.' },
  'machine-suspended-no-wake': {
    status: 409,
    message: 'The machine is suspended and cannot be woken.',
  },
  'machine-not-placed': { status: 503, message: 'The machine has no host yet.' },
  'too-many-sessions': {
    status: 429,
    message: 'The machine has as many shell sessions as allowed.',
  },
  'host-unavailable': { status: 503, message: 'The host is unreachable.' },
  'audit-unavailable': {
    status: 503,
    message: 'The session audit was not written, so the session was not opened.',
  },
  'exec-disabled': { status: 503, message: 'Shell sessions are switched off.' },
  'guest-agent-timeout': { status: 504, message: 'The guest did not answer in time.' },
  'guest-agent-version': { status: 409, message: 'The guest agent is too old.' },
  'guest-agent-protocol': { status: 502, message: 'Unexpected answer from the guest.' },
  'host-error': { status: 502, message: 'The host failed to open the session.' },
  'host-timeout': { status: 504, message: 'The host did not answer in time.' },

  // pier: codes of our own design, documented in docs/api.md
  'too-many-tunnels': {
    status: 429,
    message: 'The database, or the organization, has as many tunnels open as allowed.',
  },
  'sql-error': {
    status: 422,
    message: 'PostgreSQL refused the statement; sqlstate and position say why.',
  },
  'read-only-transaction': {
    status: 409,
    message: 'The statement would write, and it ran in a read-only transaction.',
  },
  'sql-timeout': { status: 422, message: 'The statement ran longer than its timeout.' },
  'sql-postgres-only': { status: 409, message: 'SQL runs on PostgreSQL databases only.' },
  'method-not-allowed': { status: 405, message: 'This route does not take that method.' },
  'unsupported-media-type': { status: 415, message: 'The body must be JSON.' },
  // pier: what the HTTP server itself refuses before any route runs
  'request-timeout': { status: 408, message: 'The request was not received in time.' },
  'uri-too-long': { status: 414, message: 'A part of the path is longer than pier accepts.' },
  'headers-too-large': { status: 431, message: 'The request headers are too large.' },
  'authorization-pending': {
    status: 400,
    message: 'The login has not been approved yet; keep polling.',
  },
  'access-denied': { status: 403, message: 'The person declined the login.' },
  'expired-token': { status: 410, message: 'The device code expired; start again.' },
  'bucket-not-empty': { status: 409, message: 'The bucket holds objects.' },
  'bucket-attached': { status: 409, message: 'The bucket is attached to an app.' },
  'already-attached': { status: 409, message: 'The resource is already attached to this app.' },
  'not-attached': { status: 404, message: 'The resource is not attached to this app.' },
  'checkpoint-not-found': { status: 404, message: 'The machine has no checkpoint of that label.' },
  'secret-managed': {
    status: 409,
    message: 'The secret is managed by an attachment; detach the resource instead.',
  },
  'file-permission-denied': {
    status: 403,
    message: "The machine's user may not do this to the file.",
  },
} as const satisfies Record<string, { status: number; message: string }>;

export type ErrorCode = keyof typeof errorCatalogue;

export function statusOf(code: ErrorCode): number {
  return errorCatalogue[code].status;
}

/**
 * The code a status has when nothing more specific is known: the first one of the
 * catalogue with that status (spec 7.1's generic codes come first), or `internal`.
 */
export function genericCodeOf(status: number): ErrorCode {
  const entry = Object.entries(errorCatalogue).find(([, e]) => e.status === status);
  return (entry?.[0] as ErrorCode | undefined) ?? 'internal';
}
