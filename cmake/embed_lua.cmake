# Lua scripts live in lua/*.lua, one per algorithm, and are compiled into the library: a
# generated .cpp holds the text and its SHA1 (what EVALSHA needs), so editing a script
# rebuilds it and there is no second copy in a string literal. Every script is sent as
# lua/prelude.lua followed by the script itself (`cat lua/prelude.lua lua/x.lua`), so what
# all of them know about the stored state is written once.
set(SLUICE_EMBED_SCRIPT ${CMAKE_CURRENT_LIST_DIR}/embed_lua_file.cmake)
set(SLUICE_LUA_PRELUDE ${CMAKE_CURRENT_LIST_DIR}/../lua/prelude.lua)

# sluice_embed_lua(<out_var> <name> <lua file>): generates the .cpp defining
# sluice::detail::lua_<name> (see src/redis/scripts.hpp) and appends its path to <out_var>.
function(sluice_embed_lua out_var name lua_file)
  set(out ${CMAKE_CURRENT_BINARY_DIR}/lua_${name}.cpp)
  add_custom_command(
    OUTPUT ${out}
    COMMAND ${CMAKE_COMMAND} -DNAME=${name} -DINPUT=${lua_file} -DPRELUDE=${SLUICE_LUA_PRELUDE}
            -DOUTPUT=${out} -P ${SLUICE_EMBED_SCRIPT}
    DEPENDS ${lua_file} ${SLUICE_LUA_PRELUDE} ${SLUICE_EMBED_SCRIPT}
    COMMENT "Embedding ${lua_file}"
    VERBATIM)
  set(${out_var} ${${out_var}} ${out} PARENT_SCOPE)
endfunction()
