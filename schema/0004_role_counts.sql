-- 0004: messages by role, kept per conversation like the other listing totals, so that
-- statistics never count rows. A JSON object {role: count} over the main branch's messages.
ALTER TABLE conversations ADD COLUMN role_counts TEXT NOT NULL DEFAULT '{}';
UPDATE conversations SET role_counts = coalesce((
    SELECT json_group_object(role, n) FROM (
        SELECT m.role AS role, count(*) AS n
        FROM documents d JOIN document_lines dl ON dl.document_id = d.id JOIN messages m ON m.id = dl.message_id
        WHERE d.conversation_id = conversations.id AND d.kind = 'branch' AND d.name = 'main' AND m.role IS NOT NULL
        GROUP BY m.role ORDER BY m.role)), '{}');
