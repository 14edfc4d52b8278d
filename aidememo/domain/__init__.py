"""Pure domain rules: identifiers, errors, canonical JSON, records and state tables."""
