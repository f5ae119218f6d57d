; Every call expression with its callee (host-side call graph: callers of a helper function,
; allocations such as cudaMalloc(&d_a, bytes)).
(call_expression function: (_) @callee) @call
