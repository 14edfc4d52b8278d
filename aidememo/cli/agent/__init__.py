"""The agent commands: act as a named profile (`auth login`) through `aidememo.client`, with
an offline replica and a durable outbox per profile. `parser` adds them to the command tree;
each handler module loads when its command runs."""
