"""Types and small tools every layer uses: settings, the response contract, errors, digests, caches."""
