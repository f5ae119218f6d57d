/* perflsp: an empty stand-in. clang's CUDA wrapper (through LLVM 20) includes this header of
   texture references, which CUDA 13 removed; searched last (-idirafter), so a real one wins. */
