-- aidememo_execute_raw as schema versions 13 and 14 created it (it answered whether it wrote
-- and the rows it read): the starting point of tests/stores/test_postgres_raw_verdict.py's
-- upgrade test.
CREATE OR REPLACE FUNCTION aidememo_execute_raw(
    p_statement_timeout TEXT, p_lock_timeout TEXT,
    p_tenant TEXT, p_project TEXT, p_actor TEXT, p_command TEXT, p_fingerprint TEXT,
    p_kind TEXT, p_resource TEXT, p_writers TEXT, p_expected BIGINT, p_must_exist BOOLEAN,
    p_operation TEXT, p_op TEXT, p_body BYTEA, p_at BIGINT,
    OUT committed BOOLEAN, OUT seq BIGINT, OUT revision BIGINT, OUT committed_at_ms BIGINT,
    OUT project_epoch TEXT, OUT head_seq BIGINT,
    OUT member_role TEXT, OUT member_status TEXT,
    OUT r_fingerprint TEXT, OUT r_actor TEXT, OUT r_seq BIGINT, OUT r_kind TEXT,
    OUT r_resource TEXT, OUT r_revision BIGINT, OUT r_at BIGINT,
    OUT found_resource BOOLEAN, OUT res_revision BIGINT
) LANGUAGE plpgsql AS $fn$
BEGIN
    -- On an autocommit connection this statement is the transaction its timeouts last for.
    SELECT c.* INTO project_epoch, head_seq, member_role, member_status,
                    r_fingerprint, r_actor, r_seq, r_kind, r_resource, r_revision, r_at
        FROM aidememo_lock_command(p_statement_timeout, p_lock_timeout,
                                   p_tenant, p_project, p_actor, p_command) c;
    SELECT s.revision INTO res_revision
        FROM resources s
        WHERE s.tenant_id = p_tenant AND s.project_id = p_project
          AND s.kind = p_kind AND s.resource_id = p_resource;
    found_resource := FOUND;
    committed := project_epoch IS NOT NULL AND member_status = 'active'
        AND member_role = ANY (string_to_array(p_writers, ' ')) AND r_fingerprint IS NULL
        AND (found_resource OR (p_expected IS NULL AND NOT p_must_exist))
        AND (p_expected IS NULL OR res_revision = p_expected);
    IF NOT coalesce(committed, false) THEN
        committed := false;
        RETURN;
    END IF;
    seq := head_seq + 1;
    revision := coalesce(res_revision, 0) + 1;
    committed_at_ms := p_at;
    PERFORM aidememo_commit_mutation(
        p_tenant, p_project, seq, project_epoch,
        p_command, p_fingerprint, p_actor, p_kind, p_resource,
        revision, p_at, p_operation, p_op, p_body,
        NULL, NULL, NULL, NULL, NULL, NULL, NULL,
        NULL, NULL, NULL);
    IF EXISTS (SELECT 1 FROM aidememo_listeners) THEN
        PERFORM pg_notify('aidememo_commits', json_build_array(p_tenant, p_project, seq)::text);
    END IF;
END
$fn$
