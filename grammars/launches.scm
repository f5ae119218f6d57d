; kernel<<<grid, block, shared_mem, stream>>>(args)
(call_expression
  function: (_) @callee
  (kernel_call_syntax) @config
  arguments: (argument_list) @args) @launch

; cudaLaunchKernel((void *)k, grid, block, args, shmem, stream) and the other runtime calls that
; launch a kernel (kernels/context.py: API_LAUNCHES)
(call_expression
  function: (identifier) @api
  (#any-of? @api "cudaLaunchKernel" "cudaLaunchCooperativeKernel" "hipLaunchKernel" "hipLaunchCooperativeKernel" "hipLaunchKernelGGL")
  arguments: (argument_list) @api_args) @launch
