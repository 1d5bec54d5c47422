"""Background controllers: loops that work on what the extender answered or what the cluster holds, one package
each with one entry point and its own HTTP and metrics surface beside it. They stand on `rules`, `decide`,
`cluster` and `writes`, never on the HTTP edge (`extender`), which composes them."""
