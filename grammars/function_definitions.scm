; Every function definition: checked against macros that expand to __global__/__device__
; (`#define GLOBAL __global__`). Only run when the file sees such a macro.
(function_definition) @function
