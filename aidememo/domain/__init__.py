"""Pure domain rules: identifiers and stable command ids, errors, canonical JSON, records and
state tables."""
