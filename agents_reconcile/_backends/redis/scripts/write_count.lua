-- write_count(): a session's write count under the backend ARGV[1]: the count stored, or the
-- journal's floor when there is none (count_of). Read only.
return count_of(session_keys(SESSION_AT), ARGV[1])
