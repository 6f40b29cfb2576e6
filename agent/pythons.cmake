# The CPythons the agent is built for: one libprobing-cpXY.so each (an
# extension's ABI, and CPython's internals, are per version).
#
#   PROBING_PYTHONS   a list of Python executables (cache variable).  Empty
#                     (the default): Python3_EXECUTABLE, then every CPython
#                     3.9-3.15 found on the machine whose headers are
#                     installed: /usr/bin/python3.X, /usr/local/bin/python3.X,
#                     pyenv's versions ($PYENV_ROOT or ~/.pyenv).  One build
#                     per minor version: the first found of each wins.
#
# A free-threaded build (3.13t, Py_GIL_DISABLED) is only taken when
# PROBING_PYTHONS names it; its tag and version end in "t" ("313t",
# "3.13t": libprobing-cp313t.so, lib/python3.13t/site-packages).
#
# Sets PROBING_PY_TAGS (e.g. "39;310;311"), writes them to
# build/pythons.txt, and for each tag T:
# PROBING_PY_T_VERSION ("3.9"), PROBING_PY_T_INCLUDE (its headers),
# PROBING_PY_T_EXE, PROBING_PY_T_LIBRARY (its shared libpython, "" when it
# has none: the tests that embed an interpreter need one).  PROBING_PY_SUPPORTED is the text of the versions, for
# messages ("3.9, 3.10, 3.11").
set(PROBING_PYTHONS "" CACHE STRING
  "Python executables to build the agent for (default: every CPython 3.9-3.15 found with its headers)")

# Fills VAR_VERSION and VAR_INCLUDE from executable EXE, or leaves them
# empty when it is no CPython 3.9-3.15 with its headers (and internal ones).
function(probing_probe_python exe var)
  set(${var}_VERSION "" PARENT_SCOPE)
  execute_process(
    COMMAND ${exe} -c "import os, sys, sysconfig as c; print(sys.implementation.name, '%d.%d' % sys.version_info[:2], c.get_paths()['include'], os.path.join(c.get_config_var('LIBDIR') or '', c.get_config_var('LDLIBRARY') or ''), 't' if c.get_config_var('Py_GIL_DISABLED') else '-', sep=';')"
    OUTPUT_VARIABLE out RESULT_VARIABLE rc ERROR_QUIET
    OUTPUT_STRIP_TRAILING_WHITESPACE TIMEOUT 30)
  if(NOT rc EQUAL 0)
    return()
  endif()
  list(LENGTH out n)
  if(NOT n EQUAL 5)
    return()
  endif()
  list(GET out 0 impl)
  list(GET out 1 version)
  list(GET out 2 include)
  list(GET out 3 library)
  list(GET out 4 threading)
  if(NOT impl STREQUAL "cpython" OR version VERSION_LESS 3.9 OR
     version VERSION_GREATER_EQUAL 3.16 OR
     NOT EXISTS "${include}/Python.h" OR
     NOT EXISTS "${include}/internal/pycore_runtime.h")
    return()
  endif()
  if(threading STREQUAL "t")
    string(APPEND version "t")
  endif()
  set(${var}_VERSION ${version} PARENT_SCOPE)
  set(${var}_INCLUDE ${include} PARENT_SCOPE)
  set(${var}_LIBRARY "" PARENT_SCOPE)
  if(library MATCHES "\\.so$" AND EXISTS "${library}")
    set(${var}_LIBRARY ${library} PARENT_SCOPE)
  endif()
endfunction()

set(candidates ${PROBING_PYTHONS})
if(NOT candidates)
  set(candidates ${Python3_EXECUTABLE})
  set(pyenv_root $ENV{PYENV_ROOT})
  if(NOT pyenv_root)
    set(pyenv_root $ENV{HOME}/.pyenv)
  endif()
  foreach(minor 9 10 11 12 13 14 15)
    file(GLOB found /usr/bin/python3.${minor} /usr/local/bin/python3.${minor}
      ${pyenv_root}/versions/3.${minor}.*/bin/python3.${minor})
    list(SORT found COMPARE NATURAL ORDER DESCENDING)
    list(APPEND candidates ${found})
  endforeach()
endif()

set(PROBING_PY_TAGS "")
set(PROBING_PY_SUPPORTED "")
foreach(exe IN LISTS candidates)
  probing_probe_python(${exe} probe)
  if(NOT probe_VERSION)
    if(PROBING_PYTHONS)
      message(FATAL_ERROR "PROBING_PYTHONS: ${exe} is no CPython 3.9-3.15 with its headers (python3.X-dev)")
    endif()
    continue()
  endif()
  if(probe_VERSION MATCHES "t$" AND NOT PROBING_PYTHONS)
    continue()  # free-threaded: only when named
  endif()
  string(REPLACE "." "" tag ${probe_VERSION})
  if(tag IN_LIST PROBING_PY_TAGS)
    continue()
  endif()
  list(APPEND PROBING_PY_TAGS ${tag})
  set(PROBING_PY_${tag}_VERSION ${probe_VERSION})
  set(PROBING_PY_${tag}_INCLUDE ${probe_INCLUDE})
  set(PROBING_PY_${tag}_EXE ${exe})
  set(PROBING_PY_${tag}_LIBRARY "${probe_LIBRARY}")
  message(STATUS "Probing: agent for CPython ${probe_VERSION} (${exe})")
endforeach()
if(NOT PROBING_PY_TAGS)
  message(FATAL_ERROR "no CPython 3.9-3.15 with its headers found: install python3-dev or set PROBING_PYTHONS")
endif()
list(SORT PROBING_PY_TAGS COMPARE NATURAL)
foreach(tag IN LISTS PROBING_PY_TAGS)
  list(APPEND PROBING_PY_SUPPORTED ${PROBING_PY_${tag}_VERSION})
endforeach()
string(REPLACE ";" ", " PROBING_PY_SUPPORTED "${PROBING_PY_SUPPORTED}")

# build/pythons.txt: "TAG VERSION EXECUTABLE" a line, for scripts/install
# and the tests.
set(lines "")
foreach(tag IN LISTS PROBING_PY_TAGS)
  string(APPEND lines "${tag} ${PROBING_PY_${tag}_VERSION} ${PROBING_PY_${tag}_EXE}\n")
endforeach()
file(WRITE ${CMAKE_BINARY_DIR}/pythons.txt "${lines}")
