; kernel<<<grid, block, shared_mem, stream>>>(args)
(call_expression
  function: (_) @callee
  (kernel_call_syntax) @config
  arguments: (argument_list) @args) @launch
