; Statements that change what is known about a local variable (constant folding of launch
; configurations): declarations, assignments and ++/--.
(declaration) @declaration
(assignment_expression) @assignment
(update_expression) @update
