import type { StaffMe } from '@idem/contracts';
import { createContext, type ReactNode, useContext } from 'react';

/**
 * The signed-in staff member, for every staff screen. Its own module so the screens import the
 * hook, not the app shell that renders them (which would make each screen and the shell import
 * each other).
 */
const StaffSessionContext = createContext<StaffMe | null>(null);

/** Provided by StaffApp once `staffAuth.me` answers and TOTP is done. */
export function StaffSessionProvider({ me, children }: { me: StaffMe; children: ReactNode }) {
  return <StaffSessionContext.Provider value={me}>{children}</StaffSessionContext.Provider>;
}

export function useStaff(): StaffMe {
  const me = useContext(StaffSessionContext);
  if (!me) throw new Error('useStaff outside the staff screens');
  return me;
}
