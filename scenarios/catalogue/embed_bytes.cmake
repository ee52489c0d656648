# cmake -DIN=file -DOUT=file.cc -DSYMBOL=kName -DHEADER=path/to/decl.h -P embed_bytes.cmake
# Writes a C++ source defining `const unsigned char SYMBOL[]` (and
# SYMBOL##Size) with the bytes of IN, in namespace leapfrog::catalogue.
file(READ "${IN}" hex HEX)
string(LENGTH "${hex}" len)
math(EXPR size "${len} / 2")
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
# 16 bytes (80 characters) a line.
string(REGEX REPLACE "((0x[0-9a-f][0-9a-f],){16})" "\\1\n" bytes "${bytes}")
get_filename_component(name "${IN}" NAME)
file(WRITE "${OUT}.tmp"
  "// Generated from ${name} by embed_bytes.cmake: do not edit.\n"
  "#include \"${HEADER}\"\n\n"
  "namespace leapfrog::catalogue {\n\n"
  "const unsigned char ${SYMBOL}[] = {\n${bytes}\n};\n"
  "const size_t ${SYMBOL}Size = ${size};\n\n"
  "}  // namespace leapfrog::catalogue\n")
file(RENAME "${OUT}.tmp" "${OUT}")
