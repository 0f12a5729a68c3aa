import { Anchor, Container, Stack, Text, Title } from '@mantine/core';
import { Redirect, Route, Switch } from 'wouter';
import { CustomerApp } from './customer/CustomerApp.tsx';
import { CustomerStart } from './customer/CustomerStart.tsx';
import { StaffApp } from './staff/StaffApp.tsx';
import { StaffInvite } from './staff/StaffInvite.tsx';
import { StaffLogin } from './staff/StaffLogin.tsx';

export function App() {
  return (
    <Switch>
      <Route path="/customer/start" component={CustomerStart} />
      <Route path="/customer" nest>
        <CustomerApp />
      </Route>
      <Route path="/staff/login" component={StaffLogin} />
      <Route path="/staff/invite" component={StaffInvite} />
      <Route path="/staff" nest>
        <StaffApp />
      </Route>
      <Route path="/">
        <Redirect to="/staff/login" />
      </Route>
      <Route>
        <Container size="sm" py="xl">
          <Stack>
            <Title order={1}>Page not found</Title>
            <Text>
              <Anchor href="/staff/login">Staff sign-in</Anchor>
            </Text>
          </Stack>
        </Container>
      </Route>
    </Switch>
  );
}
