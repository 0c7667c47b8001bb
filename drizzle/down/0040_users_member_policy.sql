-- Down step of 0040_users_member_policy: the users table admits its tenant's own users only again
-- (shared identities are then seen on the platform path alone).
ALTER POLICY "tenant_isolation" ON "users" TO public USING (tenant_id = nullif(current_setting('plinth.tenant_id', true), '')::uuid or current_setting('plinth.platform', true) = 'on') WITH CHECK (tenant_id = nullif(current_setting('plinth.tenant_id', true), '')::uuid or current_setting('plinth.platform', true) = 'on');
