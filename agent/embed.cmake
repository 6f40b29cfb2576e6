# Turns a text file into a C array: cmake -DIN=file -DOUT=header -DNAME=sym -P embed.cmake
file(READ ${IN} content HEX)
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," content "${content}")
file(WRITE ${OUT} "/* Generated from ${IN} by embed.cmake; do not edit. */\nstatic const char ${NAME}[] = {${content} 0x00};\n")
