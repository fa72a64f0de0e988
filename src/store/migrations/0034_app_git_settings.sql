-- An app's Git settings (issue #26, `PUT /v1/apps/:name/git`): the branch whose push
-- deploys the app (null: the default, `main` or `master`) and whether a push of any other
-- branch deploys that branch's preview (true, as before this setting existed) or is only
-- stored. The branch name is checked by the route (git's rules); the store keeps its bound.
ALTER TABLE apps
  ADD COLUMN git_production_branch text
    CHECK (git_production_branch IS NULL OR length(git_production_branch) BETWEEN 1 AND 255),
  ADD COLUMN git_branch_previews boolean NOT NULL DEFAULT true;
