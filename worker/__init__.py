"""Edge Worker: authentication, limits and routing to the project Durable Object."""
