/* perflsp: an empty stand-in. clang's CUDA wrapper includes this cuRAND header unconditionally;
   cuRAND is a separate component a CUDA install may lack. Searched last (-idirafter), so a real
   one wins; a unit that includes cuRAND itself still needs the real headers. */
