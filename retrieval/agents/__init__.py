"""Who is calling and what is theirs: the agent behind a tool token (``identity``, ``tokens``),
the domains it may see (``scopes``), the action memory of its sessions
(``tracker``), its throttle budget (``throttling``) and the language it is spoken to in
(``language``, ``texts``)."""
