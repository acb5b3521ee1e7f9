"""Pure formatting of workflow query answers into omectl's tables and progress lines: one
module per table of the spec reference (§8 `get ir`, §9 `instance list`, §11 `retry-blocks`,
§13 `migration status`, §17 `get tm`), each a function of models to rows, table-tested."""
