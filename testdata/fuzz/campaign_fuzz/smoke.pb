
smokesetattr-lookup"tmpfs(: