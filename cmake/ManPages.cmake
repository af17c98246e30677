# Manual pages: man/*.1, man/*.3 and man/*.7 (mdoc), installed under
# ${CMAKE_INSTALL_MANDIR}/man1, man3 and man7. A page documents several functions, listed with .Nm in its NAME section; each
# of those names that is not the page's own gets a symbolic link to the page
# (dispatch_sync_f.3 -> dispatch_async.3), so `man dispatch_sync_f` finds it. The links
# are made here, at configure time, from the pages themselves, and installed as links.
# scripts/check-manpages.sh checks the installed result (the `make test` step).

file(GLOB GC_MAN_PAGES CONFIGURE_DEPENDS
     ${CMAKE_CURRENT_SOURCE_DIR}/man/*.1 ${CMAKE_CURRENT_SOURCE_DIR}/man/*.3
     ${CMAKE_CURRENT_SOURCE_DIR}/man/*.7)
set(GC_MAN_LINKS ${CMAKE_CURRENT_BINARY_DIR}/man-links)
file(REMOVE_RECURSE ${GC_MAN_LINKS})

foreach(GC_PAGE IN LISTS GC_MAN_PAGES)
  # Editing a page's NAME section changes its links: configure again when a page changes.
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${GC_PAGE})
  get_filename_component(GC_PAGE_FILE ${GC_PAGE} NAME)
  string(REGEX MATCH "^([A-Za-z0-9_-]+)\\.([0-9])$" GC_MATCHED ${GC_PAGE_FILE})
  if(NOT GC_MATCHED)
    message(FATAL_ERROR "man/${GC_PAGE_FILE}: expected <name>.<section>")
  endif()
  set(GC_PAGE_NAME ${CMAKE_MATCH_1})
  set(GC_SECTION ${CMAKE_MATCH_2})
  install(FILES ${GC_PAGE} DESTINATION ${CMAKE_INSTALL_MANDIR}/man${GC_SECTION})

  # The .Nm lines between ".Sh NAME" and the next section heading.
  file(STRINGS ${GC_PAGE} GC_LINES REGEX "^\\.(Sh|Nm)( |$)")
  set(GC_IN_NAME FALSE)
  foreach(GC_LINE IN LISTS GC_LINES)
    if(GC_LINE MATCHES "^\\.Sh NAME$")
      set(GC_IN_NAME TRUE)
    elseif(GC_LINE MATCHES "^\\.Sh ")
      set(GC_IN_NAME FALSE)
    elseif(GC_IN_NAME AND GC_LINE MATCHES "^\\.Nm ([A-Za-z0-9_-]+)")
      if(NOT CMAKE_MATCH_1 STREQUAL GC_PAGE_NAME)
        file(MAKE_DIRECTORY ${GC_MAN_LINKS}/man${GC_SECTION})
        file(CREATE_LINK ${GC_PAGE_FILE} ${GC_MAN_LINKS}/man${GC_SECTION}/${CMAKE_MATCH_1}.${GC_SECTION}
             SYMBOLIC)
      endif()
    endif()
  endforeach()
endforeach()

# install(DIRECTORY) copies symbolic links as links.
if(EXISTS ${GC_MAN_LINKS})
  install(DIRECTORY ${GC_MAN_LINKS}/ DESTINATION ${CMAKE_INSTALL_MANDIR})
endif()
