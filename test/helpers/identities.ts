/**
 * The user-name prefix of the database identities that test platforms make. Global setup
 * sweeps users of this prefix that a crashed run left (userdel refuses any user a process
 * still runs as, so a concurrent run's running servers keep theirs).
 */
export const TEST_IDENTITY_PREFIX = 'piertest-';
