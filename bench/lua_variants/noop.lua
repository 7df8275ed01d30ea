-- Floor: the cost of an EVALSHA call that does nothing (script lookup, Lua call, reply).
return 1
