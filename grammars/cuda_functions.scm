; CUDA functions: the execution-space keyword is an anonymous token of function_definition.
; Prototypes (`__global__ void k(int);`) are `declaration`s and deliberately not matched.
((function_definition "__global__") @function)
((function_definition "__device__") @function)
