# Writes OUT (a header defining MLA_GIT_COMMIT) at build time, rewriting it
# only when the commit changed, so every build names the commit it was built
# from (a configure-time value goes stale with each commit). Where the tree
# has no .git (a copy on another machine), MLA_COMMIT_OVERRIDE or the
# environment variable MLA_COMMIT names it.
execute_process(COMMAND git -C "${SRC}" describe --always --dirty --abbrev=12
  OUTPUT_VARIABLE commit OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET RESULT_VARIABLE rc)
if(OVERRIDE)
  set(commit "${OVERRIDE}")
elseif(DEFINED ENV{MLA_COMMIT} AND NOT "$ENV{MLA_COMMIT}" STREQUAL "")
  set(commit "$ENV{MLA_COMMIT}")
elseif(NOT rc EQUAL 0 OR commit STREQUAL "")
  set(commit "unknown")
endif()
set(text "#define MLA_GIT_COMMIT \"${commit}\"\n")
if(EXISTS "${OUT}")
  file(READ "${OUT}" old)
endif()
if(NOT "${old}" STREQUAL "${text}")
  file(WRITE "${OUT}" "${text}")
endif()
