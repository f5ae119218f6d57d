; Statements that change what is known about a local variable (constant folding of launch
; configurations): declarations, assignments, ++/-- and taking the address (`&x` lets a call
; such as cudaOccupancyMaxPotentialBlockSize(&grid, &block, ...) write it).
(declaration) @declaration
(assignment_expression) @assignment
(update_expression) @update
; `&x`: the variable may be written through the pointer (`parse(argv, &n)`, `scanf("%d", &n)`)
(pointer_expression operator: "&" argument: (identifier)) @address
(pointer_expression operator: "&" argument: (field_expression)) @address
(pointer_expression operator: "&" argument: (parenthesized_expression (field_expression))) @address
; `f(x)`: the variable may be written through a reference parameter (`void size(int &threads)`)
(argument_list (identifier) @argument)
; `in >> n >> m;`: a stream extraction (a shift whose value a statement drops is no arithmetic)
; writes its operands (`file >> size;`, `std::cin >> n;`)
(expression_statement (binary_expression operator: ">>") @extraction)
; A `return` inside a branch or loop: the function may end there (`out_parameters`)
(return_statement) @exit
; Control statements: where their conditions are folded (a branch or loop the point is not in
; runs only when its condition allows)
(if_statement) @control
(for_statement) @control
(while_statement) @control
(do_statement) @control
(switch_statement) @control
(for_range_loop) @control
