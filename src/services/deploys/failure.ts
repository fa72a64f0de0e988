/** Why a deploy ended `error`: a reason for the user, not a fault of the host. */
export class DeployFailure extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'DeployFailure';
  }
}
