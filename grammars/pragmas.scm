; `#pragma ...` lines. In the CUDA grammar a pragma inside a function is a preproc_call that sits
; *beside* the statement it applies to (its next named sibling), not around it.
(preproc_call
  directive: (preproc_directive) @directive
  argument: (preproc_arg) @argument) @pragma
